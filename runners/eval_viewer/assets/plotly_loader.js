// plotly.js is not a script of the first page, which draws no plotly graph (assets/score_views.js draws the score
// chart and grid). It is loaded once, from the address the server gives (``lanternPlotlyURL``, app.py: the slim
// bundle, 1.3 MB, or Dash's own where plotly.py expects another plotly.js), as soon as a graph asks for it or, once
// the table has its rows, when the browser is idle, so that opening a datapoint finds it ready. dcc.Graph takes
// plotly.js from ``Promise.resolve(window.Plotly || ...)``: a thenable here makes every graph wait for this one load
// (plotly.js then replaces it with itself), instead of loading Dash's full bundle.
window.lanternPlotly = (function () {
    let loading = null;

    function load() {
        if (loading === null) {
            loading = new Promise(function (resolve, reject) {
                const script = document.createElement("script");
                script.src = window.lanternPlotlyURL || window._dashPlotlyJSURL;
                script.onload = function () { resolve(window.Plotly); };
                script.onerror = function () {  // the next graph tries again
                    loading = null;
                    reject(new Error(`plotly.js could not be loaded from ${script.src}: is the viewer still running?`));
                };
                document.head.appendChild(script);
            });
        }
        return loading;
    }

    if (!window.Plotly) {
        window.Plotly = { then: function (resolve, reject) { return load().then(resolve, reject); } };
    }
    return {
        load: load,
        loadWhenIdle: function () {
            if (loading === null) { (window.requestIdleCallback || setTimeout)(load); }
        },
    };
})();
