/* Live cells: refresh the cells of a list in place, without reloading the page.
 *
 * A page opts in with an element carrying data-ojs-live-url (a view answering
 * {"rows": {pk: {field: html}}}) and data-ojs-live-seconds. The view is asked
 * with the page's own query string (its filters, search and page), unless the
 * element carries data-ojs-live-query: the query to ask with instead, for a
 * page whose parameters are not the list's (the overview's ?chart=). Rows are found by
 * an element with data-pk, cells by Django's "field-<name>" class, so ticked
 * checkboxes and the action bar are left alone. Refreshing pauses while the
 * tab is hidden. No build step, no dependency.
 */
'use strict';
(function () {
    // The console's one format for a point in time (admin/display.py timestamp): 2026-11-27 10:04:05Z.
    function stamp(date) {
        const iso = date.toISOString();
        return iso.slice(0, 10) + ' ' + iso.slice(11, 19) + 'Z';
    }

    function start(status) {
        const url = status.dataset.ojsLiveUrl;
        const seconds = Number(status.dataset.ojsLiveSeconds) || 3;
        const query = 'ojsLiveQuery' in status.dataset ? status.dataset.ojsLiveQuery : window.location.search;
        let busy = false;

        function rowsOnPage() {
            const rows = new Map();
            document.querySelectorAll('[data-pk]').forEach(function (marker) {
                const row = marker.closest('tr');
                if (row) {
                    rows.set(marker.dataset.pk, row);
                }
            });
            return rows;
        }

        function say(text, problem) {
            status.textContent = text;
            status.classList.toggle('ojs-live-problem', Boolean(problem));
        }

        async function refresh() {
            if (busy || document.hidden) {
                return;
            }
            busy = true;
            try {
                const response = await fetch(url + query, {
                    headers: {'Accept': 'application/json'},
                    credentials: 'same-origin',
                    cache: 'no-store'
                });
                if (!response.ok) {
                    say('Live updates failed: the server answered ' + response.status + '. Retrying.', true);
                    return;
                }
                const data = await response.json();
                const rows = rowsOnPage();
                let joined = 0;
                Object.keys(data.rows).forEach(function (pk) {
                    const row = rows.get(pk);
                    if (!row) {
                        joined += 1;
                        return;
                    }
                    row.classList.remove('ojs-gone');
                    const cells = data.rows[pk];
                    Object.keys(cells).forEach(function (field) {
                        const cell = row.querySelector('.field-' + field);
                        if (cell && cell.innerHTML !== cells[field]) {
                            cell.innerHTML = cells[field];
                        }
                    });
                });
                let gone = 0;
                rows.forEach(function (row, pk) {
                    if (!(pk in data.rows)) {
                        row.classList.add('ojs-gone');
                        gone += 1;
                    }
                });
                let text = 'Live: updated ' + stamp(new Date()) + '.';
                if (gone) {
                    text += ' ' + gone + ' no longer registered (struck through).';
                }
                if (joined) {
                    text += ' ' + joined + ' new: reload the page to see them.';
                }
                say(text, false);
            } catch (error) {
                say('Live updates failed: ' + error.message + '. Retrying.', true);
            } finally {
                busy = false;
            }
        }

        refresh();
        window.setInterval(refresh, seconds * 1000);
        document.addEventListener('visibilitychange', refresh);
    }

    document.addEventListener('DOMContentLoaded', function () {
        document.querySelectorAll('[data-ojs-live-url]').forEach(start);
    });
})();
