/* Copy buttons: a click copies the button's data-ojs-copy (a full id) to the clipboard.
 *
 * Lists show ids short (admin/display.py id_cell); the button beside one
 * copies the whole, for the search box, a log search or the API. One
 * listener on the document serves every button, those the live refresh
 * (live.js) puts in later too. The Clipboard API needs a secure context
 * (HTTPS, or localhost); elsewhere the id is copied through a selected text
 * field. No build step, no dependency.
 */
'use strict';
(function () {
    const SAID_FOR_MS = 1500;

    function copyBySelection(text) {
        const field = document.createElement('textarea');
        field.value = text;
        field.setAttribute('readonly', '');
        field.style.position = 'fixed';
        field.style.opacity = '0';
        document.body.appendChild(field);
        field.select();
        const done = document.execCommand('copy');
        field.remove();
        return done ? Promise.resolve() : Promise.reject(new Error('copy refused'));
    }

    function copy(text) {
        if (navigator.clipboard && window.isSecureContext) {
            return navigator.clipboard.writeText(text).catch(function () { return copyBySelection(text); });
        }
        return copyBySelection(text);
    }

    document.addEventListener('click', function (event) {
        const button = event.target.closest('button[data-ojs-copy]');
        if (!button) {
            return;
        }
        event.preventDefault();
        copy(button.dataset.ojsCopy).then(function () {
            button.classList.add('ojs-copied');
            button.title = 'Copied';
        }, function () {
            button.title = 'Could not copy: select the id on the job page';
        }).finally(function () {
            window.setTimeout(function () {
                button.classList.remove('ojs-copied');
                button.title = 'Copy the full id';
            }, SAID_FOR_MS);
        });
    });
})();
