// Start loading the lazily loaded parts of the components the first page draws (the table's AG Grid, the
// dropdowns) before Dash renders the page. React.lazy suspends a component on its first render until
// its module has loaded, and React then shows it one retry later: on a busy machine the table appeared (and
// asked for its rows) 0.5-1.5 s after the rest of the page, and Dash held the first callbacks back until the
// dropdowns were ready. (Graphs are left out: the first page draws none, and plotly.js comes later, see
// plotly_loader.js.) Rendering each component once, off the page, starts those loads while the
// browser still waits for the page's layout; their code comes with the page (FIRST_PAGE_CHUNKS in app.py).
window.addEventListener("DOMContentLoaded", function () {
    if (!ReactDOM.createRoot || !ReactDOM.flushSync) { return; }  // React before 18: Dash loads them as before
    const components = [
        window.dash_ag_grid && window.dash_ag_grid.AgGrid,
        window.dash_core_components && window.dash_core_components.Dropdown,
    ];
    components.filter(Boolean).forEach(function (component) {
        const root = ReactDOM.createRoot(document.createElement("div"));
        ReactDOM.flushSync(function () {
            root.render(React.createElement(component, { id: "lazy-component-warm-up", setProps: function () {} }));
        });
        root.unmount();
    });
});
