// Whether the runs on disk changed (a run still training grows): asked of the server every few seconds, outside
// Dash's callbacks (callbacks/refresh.py says why), and only a change ticks the page's refresh store, which the run
// list, the epoch list and the table follow. What the page was built from, and the period, come with the page
// (the hidden element refresh-poll). The next question is asked once the last is answered: a slow server is never
// asked twice at once.
(function () {
    const ANSWER_MS = 30000;  // a question unanswered this long is dropped, and asked again later
    let last = null;

    function shown(id) {
        const component = window.dash_component_api && window.dash_component_api.getLayout(id);
        return component && component.props ? component.props.value : null;
    }

    function data(id) {
        const component = window.dash_component_api && window.dash_component_api.getLayout(id);
        return component && component.props ? component.props.data : null;
    }

    async function ask() {
        const run = shown("run-select"), epoch = shown("epoch-select");
        const key = JSON.stringify([run === undefined ? null : run, epoch === undefined ? null : epoch]);
        const params = new URLSearchParams();
        if (run) { params.set("run", run); }
        if (epoch) { params.set("epoch", epoch); }
        const abort = new AbortController();
        const timer = setTimeout(function () { abort.abort(); }, ANSWER_MS);
        try {
            const answer = await fetch("_lantern/changes?" + params.toString(), {signal: abort.signal});
            if (!answer.ok) { return; }
            const now = await answer.json();
            // A switch of run or epoch loads what it shows itself: under a new view, what counts is what changed
            // since the view was built (the server says what it built it from); until it is built, nothing.
            let changed = now.runs !== last.runs;
            if (key === last.key) {
                changed = changed || now.epoch !== last.epoch;
                last = {runs: now.runs, epoch: now.epoch, key: key};
            } else {
                const built = data("view-built-from");
                const ready = built && JSON.stringify(built.key) === key;
                changed = changed || (ready && built.epoch !== now.epoch);
                last = {runs: now.runs, epoch: now.epoch, key: ready ? key : null};
            }
            if (changed) { window.dash_clientside.set_props("refresh-tick", {data: Date.now()}); }
        } catch (error) {  // the viewer stopped, or the answer took too long: ask again later
        } finally {
            clearTimeout(timer);
        }
    }

    function start() {
        const poll = document.getElementById("refresh-poll");
        if (!poll || !window.dash_clientside || !window.dash_clientside.set_props) {
            setTimeout(start, 200);  // the page is not rendered yet
            return;
        }
        last = {runs: poll.dataset.runs, epoch: poll.dataset.epoch, key: poll.dataset.key};
        const period = parseInt(poll.dataset.ms, 10);
        const next = function () { setTimeout(function () { ask().then(next); }, period); };
        next();
    }

    start();
})();
