// The Datapoint tab's plotly graphs (data/viewer/layout/display/values.py, ``lazy_graph``) are drawn when they come
// into view, not all on every click: below the fold each cost plotly.js 25-50 ms of a core for nothing the user
// sees. A graph element carries its figure as JSON (``data-figure``); the page's renderer may reuse an element for
// the next datapoint's figure, so a changed figure clears the element and is drawn again when in view, and an
// element taken out of the page is purged (plotly's listeners go with it).
(function () {
    const GRAPHS = ".lazy-graph";
    const CONFIG = { displaylogo: false, responsive: true, displayModeBar: "hover" };

    function draw(node) {
        const figure = node.getAttribute("data-figure");
        if (!figure || node.drawnFigure === figure) { return; }
        node.drawnFigure = figure;
        const { data, layout } = JSON.parse(figure);
        window.lanternPlotly.load().then(function (Plotly) {
            if (node.drawnFigure === figure && node.isConnected) { Plotly.react(node, data, layout, CONFIG); }
        });
    }

    const inView = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
            if (entry.isIntersecting) {
                inView.unobserve(entry.target);
                draw(entry.target);
            }
        });
    }, { rootMargin: "100px" });

    function clear(node) {
        inView.unobserve(node);
        if (node.drawnFigure !== undefined && window.Plotly.purge) { window.Plotly.purge(node); }
        node.drawnFigure = undefined;
    }

    function graphsIn(node) {
        if (node.nodeType !== Node.ELEMENT_NODE) { return []; }
        return node.matches(GRAPHS) ? [node] : Array.from(node.querySelectorAll(GRAPHS));
    }

    new MutationObserver(function (records) {
        records.forEach(function (record) {
            if (record.type === "attributes") {
                clear(record.target);
                inView.observe(record.target);
                return;
            }
            record.removedNodes.forEach((node) => graphsIn(node).forEach(clear));
            record.addedNodes.forEach((node) => graphsIn(node).forEach((graph) => inView.observe(graph)));
        });
    }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
                                           attributeFilter: ["data-figure"] });
})();
