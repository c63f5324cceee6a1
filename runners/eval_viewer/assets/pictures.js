// Pictures the page asks the server for by address (callbacks/pictures.py), only once they are on screen:
// - the table's thumbnail column: a cell renderer of AG Grid, which draws only the visible rows, so a 1M-row
//   epoch asks for the pictures of the rows shown; the rows request never waits for one;
// - the gallery's tiles: an <img data-src> gets its src when it comes into view.
// A picture the server has not (no captured image) leaves its place empty rather than a broken-image icon.
(function () {
    const prefix = function () {
        const config = document.getElementById("_dash-config");
        return (config && JSON.parse(config.textContent).requests_pathname_prefix) || "/";
    };

    const hide = function (event) { event.target.style.visibility = "hidden"; };

    const components = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});
    components.LanternThumbnail = function (props) {
        // rows of another epoch version (the old run's, still shown while the new one's rows come): no picture
        if (!props.data || props.data.idx === null || props.data.picture_version !== props.version) { return null; }
        const query = new URLSearchParams({ run: props.run, idx: String(props.data.idx), v: props.version });
        return React.createElement("img", {
            src: `${prefix()}${props.path}?${query.toString()}`, alt: "", className: "thumbnail",
            loading: "lazy", decoding: "async", onError: hide,
        });
    };

    const LAZY = "img[data-src]";
    const inView = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
            if (entry.isIntersecting) {
                inView.unobserve(entry.target);
                entry.target.onerror = hide;
                entry.target.src = entry.target.getAttribute("data-src");
            }
        });
    }, { rootMargin: "200px" });

    const lazyIn = (node) => node.nodeType !== Node.ELEMENT_NODE ? []
        : node.matches(LAZY) ? [node] : Array.from(node.querySelectorAll(LAZY));

    new MutationObserver(function (records) {
        records.forEach(function (record) {
            if (record.type === "attributes") {  // the page's renderer reused the element for another tile
                record.target.removeAttribute("src");
                record.target.style.visibility = "";
                inView.observe(record.target);
                return;
            }
            record.addedNodes.forEach((node) => lazyIn(node).forEach((img) => inView.observe(img)));
        });
    }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
                                           attributeFilter: ["data-src"] });
})();
