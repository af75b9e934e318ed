/* A running job's progress box refreshes itself on the job's page.
 *
 * The box carries data-ojs-progress-url (a view answering {"html", "live"})
 * and data-ojs-progress-live until the job is over; once the answer says
 * it is (completed, discarded, cancelled), refreshing stops. Pauses while the tab is
 * hidden. No build step, no dependency.
 */
'use strict';
(function () {
    const SECONDS = 2;

    function start(box) {
        let live = Boolean(box.dataset.ojsProgressLive);
        let busy = false;

        async function refresh() {
            if (!live || busy || document.hidden) {
                return;
            }
            busy = true;
            try {
                const response = await fetch(box.dataset.ojsProgressUrl, {
                    headers: {'Accept': 'application/json'}, credentials: 'same-origin', cache: 'no-store'
                });
                if (response.ok) {
                    const data = await response.json();
                    if (box.innerHTML !== data.html) {
                        box.innerHTML = data.html;
                    }
                    live = data.live;
                }
            } catch (error) {
                // A missed refresh is retried at the next tick.
            } finally {
                busy = false;
            }
        }

        window.setInterval(refresh, SECONDS * 1000);
        document.addEventListener('visibilitychange', refresh);
    }

    document.addEventListener('DOMContentLoaded', function () {
        document.querySelectorAll('[data-ojs-progress-url]').forEach(start);
    });
})();
