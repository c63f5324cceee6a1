// The score chart (SVG) and the score grid (a canvas), drawn by the page itself from the data the server sends
// (callbacks/scores.py): the first page then needs no plotly.js, whose evaluation and two drawings took ~0.3 s
// of a core before the page was usable. A click on a grid cell opens its datapoint; the open datapoint's mark
// is drawn here, with no server round trip. What was drawn is kept on the element (``scoreGrid``) for tests.
window.lanternScoreViews = (function () {
    const SVG = "http://www.w3.org/2000/svg";
    const PLOT_BACKGROUND = "#e5ecf6", LINE = "#636efa", MARK = "#1f2a37", MISSING = "#c8c8c8";
    const TITLE = 24;  // the title's row (.score-view-title) above the drawing
    const CHART = { height: 200, left: 50, right: 12, top: 4, bottom: 28 };
    const GRID = { height: 300, left: 10, right: 84, top: 4, bottom: 8, bar: 10, note: 18 };
    const FONT = '12px "Open Sans", verdana, arial, sans-serif';

    function g4(value) {  // Python's f"{value:.4g}"
        if (value === null || value === undefined) { return "n/a"; }
        const exponent = value === 0 ? 0 : Math.floor(Math.log10(Math.abs(value)));
        const text = exponent < -4 || exponent >= 4 ? value.toExponential(3) : value.toPrecision(4);
        const [mantissa, power] = text.split("e");
        const trimmed = mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa;
        return power === undefined ? trimmed : `${trimmed}e${power[0]}${power.slice(1).padStart(2, "0")}`;
    }

    function ticks(low, high, count) {  // round numbers spanning [low, high], about ``count`` of them
        const raw = (high - low) / count, unit = Math.pow(10, Math.floor(Math.log10(raw)));
        const step = unit * ([1, 2, 5, 10].find((m) => m * unit >= raw) || 10);
        const values = [];
        for (let value = Math.ceil(low / step) * step; value <= high + step * 1e-9; value += step) {
            values.push(Math.abs(value) < step * 1e-9 ? 0 : value);
        }
        return values;
    }

    function element(tag, attributes, parent) {
        const node = document.createElementNS(SVG, tag);
        Object.entries(attributes).forEach(([name, value]) => node.setAttribute(name, value));
        if (parent) { parent.appendChild(node); }
        return node;
    }

    function titled(container, text) {
        const title = document.createElement("div");
        title.className = "score-view-title";
        title.textContent = text || "";
        container.replaceChildren(title);
    }

    // Redraw when the container's width changes (a window resize, a pane that was not laid out yet).
    const resized = new ResizeObserver((entries) => entries.forEach((entry) => {
        const node = entry.target;
        if (node.drawnWidth !== undefined && node.drawnWidth !== node.clientWidth) { node.redraw(); }
    }));

    function paint(container, draw) {  // draws, and keeps how, to draw again at another width
        draw(container);
        container.redraw = () => paint(container, draw);
        container.drawnWidth = container.clientWidth;
        container.dataset.drawn = "true";
        resized.observe(container);
    }

    // Dash may run the first draw before React has put the element in the page: it is tried again for up to 120
    // frames, unless a newer draw of the element has come meanwhile (the older data would be drawn over it).
    const latest = new Map();
    function mounted(id, draw) {
        latest.set(id, draw);
        return whenMounted(id, draw, 120);
    }

    function whenMounted(id, draw, frames) {
        if (latest.get(id) !== draw) { return window.dash_clientside.no_update; }
        const container = document.getElementById(id);
        if (container) {
            paint(container, draw);
        } else if (frames > 0) {
            requestAnimationFrame(() => whenMounted(id, draw, frames - 1));
        }
        return window.dash_clientside.no_update;
    }

    function drawChart(id, data) {
        return mounted(id, function (container) {
            titled(container, data && data.title);
            const x = (data && data.x) || [], y = (data && data.y) || [];
            if (!x.length || !data.range) { return; }
            const width = Math.max(container.clientWidth, 200), height = CHART.height - TITLE;
            const plot = { left: CHART.left, top: CHART.top, width: width - CHART.left - CHART.right,
                           height: height - CHART.top - CHART.bottom };
            const [low, high] = data.range;
            const px = (i) => plot.left + plot.width * (i + 0.5) / x.length;
            const py = (v) => plot.top + plot.height * (high - v) / (high - low);
            const svg = element("svg", { width: width, height: height, class: "score-chart-svg" }, container);
            svg.style.font = FONT;
            element("rect", { x: plot.left, y: plot.top, width: plot.width, height: plot.height,
                              fill: PLOT_BACKGROUND }, svg);
            ticks(low, high, 4).forEach((value) => {
                element("line", { x1: plot.left, x2: plot.left + plot.width, y1: py(value), y2: py(value),
                                  stroke: "white" }, svg);
                element("text", { x: plot.left - 4, y: py(value) + 4, "text-anchor": "end", fill: "#444" }, svg)
                    .textContent = g4(value);
            });
            const step = Math.ceil(x.length / Math.max(1, Math.floor(plot.width / 60)));
            x.forEach((label, i) => {
                if (i % step === 0) {
                    element("text", { x: px(i), y: plot.top + plot.height + 16, "text-anchor": "middle",
                                      fill: "#444" }, svg).textContent = label;
                }
            });
            if (data.chosen !== null && x.includes(data.chosen)) {
                const at = px(x.indexOf(data.chosen));
                element("line", { x1: at, x2: at, y1: plot.top, y2: plot.top + plot.height, stroke: "grey",
                                  "stroke-dasharray": "3,3", class: "chosen-epoch" }, svg);
            }
            const segments = [];  // the line breaks where an epoch has no value
            y.forEach((value, i) => {
                if (value === null) { return; }
                segments.push(`${i > 0 && y[i - 1] !== null ? "L" : "M"}${px(i)},${py(value)}`);
            });
            element("path", { d: segments.join(""), fill: "none", stroke: LINE, "stroke-width": 2,
                              class: "score-line" }, svg);
            y.forEach((value, i) => {
                if (value === null) { return; }
                const [cx, cy] = [px(i), py(value)];
                const marker = data.debug[i]
                    ? element("path", { d: `M${cx},${cy - 7}L${cx + 7},${cy}L${cx},${cy + 7}L${cx - 7},${cy}Z` }, svg)
                    : element("circle", { cx: cx, cy: cy, r: 4 }, svg);
                marker.setAttribute("fill", LINE);
                marker.setAttribute("class", "score-point");
                element("title", {}, marker).textContent = `${x[i]}: ${value.toFixed(4)}`;
            });
        });
    }

    function colour(scale, t) {  // plotly's linear interpolation between the colour scale's stops
        let i = 1;
        while (i < scale.length - 1 && scale[i][0] < t) { i += 1; }
        const [[p0, c0], [p1, c1]] = [scale[i - 1], scale[i]];
        const f = p1 > p0 ? Math.min(Math.max((t - p0) / (p1 - p0), 0), 1) : 0;
        return `rgb(${c0.map((c, k) => Math.round(c + (c1[k] - c) * f)).join(",")})`;
    }

    function cellOf(data, selected) {  // the cell holding the open datapoint, or -1
        if (selected === null || selected === undefined) { return -1; }
        const starts = data.first || data.idx;
        let low = 0, high = starts.length - 1;
        while (low < high) {  // the last cell starting at or before ``selected`` (cells are in idx order)
            const middle = Math.ceil((low + high) / 2);
            if (starts[middle] >= 0 && starts[middle] <= selected) { low = middle; } else { high = middle - 1; }
        }
        const last = data.last ? data.last[low] : data.idx[low];
        return starts[low] >= 0 && starts[low] <= selected && selected <= last ? low : -1;
    }

    function hover(data, cell) {
        if (cell < 0 || data.idx[cell] < 0) { return null; }
        const value = g4(data.values[cell]);
        if (!data.first) { return `idx ${data.idx[cell]}: ${data.metric} ${value}`; }
        return `idx ${data.first[cell]}–${data.last[cell]}: worst ${data.metric} ${value} (idx ${data.idx[cell]})`;
    }

    let tooltip = null;
    function showTooltip(text, event) {
        if (!tooltip && !text) { return; }
        if (!tooltip) {
            tooltip = document.createElement("div");
            tooltip.className = "score-grid-tooltip";
            document.body.appendChild(tooltip);
        }
        tooltip.style.display = text ? "block" : "none";
        if (text) {
            tooltip.textContent = text;
            tooltip.style.left = `${event.clientX + 12}px`;
            tooltip.style.top = `${event.clientY + 12}px`;
        }
    }

    function drawGrid(id, data, selected, open) {
        return mounted(id, function (container) {
            showTooltip(null);  // its canvas is replaced: the mouse has not moved over the new one yet
            titled(container, data && data.title);
            if (!data || !data.columns) {
                container.scoreGrid = { idx: [], mark: null };
                return;
            }
            const note = data.missing ? GRID.note : 0;  // a line under the grid saying what grey means
            const width = Math.max(container.clientWidth, 200), height = GRID.height - TITLE - note;
            const cell = Math.min((width - GRID.left - GRID.right) / data.columns,
                                  (height - GRID.top - GRID.bottom) / data.rows);
            const plot = { left: GRID.left + (width - GRID.left - GRID.right - cell * data.columns) / 2, top: GRID.top,
                           width: cell * data.columns, height: cell * data.rows };
            const canvas = document.createElement("canvas");
            const ratio = window.devicePixelRatio || 1;
            canvas.width = width * ratio;
            canvas.height = height * ratio;
            canvas.style.width = `${width}px`;
            canvas.style.height = `${height}px`;
            container.appendChild(canvas);
            const context = canvas.getContext("2d");
            context.scale(ratio, ratio);
            const present = data.values.filter((value) => value !== null);
            const [low, high] = present.length ? [Math.min(...present), Math.max(...present)] : [0, 1];
            const gap = data.gap && cell > 4 ? 1 : 0;
            data.values.forEach((value, i) => {
                if (data.idx[i] < 0) { return; }
                context.fillStyle = value === null ? MISSING
                    : colour(data.colorscale, high > low ? (value - low) / (high - low) : 0.5);
                const [row, column] = [Math.floor(i / data.columns), i % data.columns];
                context.fillRect(plot.left + column * cell + gap / 2, plot.top + row * cell + gap / 2,
                                 cell - gap, cell - gap);
            });
            const marked = cellOf(data, selected);
            const mark = marked < 0 ? null : [marked % data.columns, Math.floor(marked / data.columns)];
            if (mark) {
                context.strokeStyle = MARK;
                context.lineWidth = 3;
                const side = Math.max(cell, 8);
                context.strokeRect(plot.left + (mark[0] + 0.5) * cell - side / 2,
                                   plot.top + (mark[1] + 0.5) * cell - side / 2, side, side);
            }
            const bar = { left: plot.left + plot.width + 10, top: plot.top, height: Math.max(plot.height, 60) };
            const gradient = context.createLinearGradient(0, bar.top + bar.height, 0, bar.top);
            data.colorscale.forEach(([position, rgb]) => gradient.addColorStop(position, `rgb(${rgb.join(",")})`));
            context.fillStyle = gradient;
            context.fillRect(bar.left, bar.top, GRID.bar, bar.height);
            context.fillStyle = "#444";
            context.font = FONT;
            const labels = high > low
                ? ticks(low, high, 4).map((value) => [g4(value), bar.top + bar.height * (high - value) / (high - low)])
                : [[g4(low), bar.top + bar.height / 2]];
            labels.forEach(([text, at]) => context.fillText(text, bar.left + GRID.bar + 4, at + 4));
            const labelsRight = bar.left + GRID.bar + 4
                + Math.max(0, ...labels.map(([text]) => context.measureText(text).width));
            // the bar's title, along its right side just past its numbers (its letters rise from the baseline)
            const titleAt = Math.min(labelsRight + 16, width - 4);
            if (data.colorbar) {  // what the colours are of
                context.save();
                context.translate(titleAt, bar.top + bar.height / 2);
                context.rotate(-Math.PI / 2);
                context.textAlign = "center";
                context.fillText(data.colorbar, 0, 0);
                context.restore();
            }
            if (data.missing) {
                const explained = document.createElement("div");
                explained.className = "score-grid-note";
                explained.title = data.missing;
                const swatch = document.createElement("span");
                swatch.className = "score-grid-swatch";
                explained.append(swatch, data.missing);
                container.appendChild(explained);
            }
            const cellAt = (event) => {
                const box = canvas.getBoundingClientRect();
                const column = Math.floor((event.clientX - box.left - plot.left) / cell);
                const row = Math.floor((event.clientY - box.top - plot.top) / cell);
                const i = row * data.columns + column;
                return column >= 0 && column < data.columns && row >= 0 && row < data.rows ? i : -1;
            };
            canvas.onmousemove = (event) => {
                const text = hover(data, cellAt(event));
                canvas.style.cursor = text ? "pointer" : "default";
                showTooltip(text, event);
            };
            canvas.onmouseleave = () => showTooltip(null);
            canvas.onclick = (event) => {
                const i = cellAt(event);
                if (i >= 0 && data.idx[i] >= 0) {
                    window.dash_clientside.set_props(open.idx, { data: data.idx[i] });
                    window.dash_clientside.set_props(open.row, { data: null });
                }
            };
            container.scoreGrid = { idx: data.idx, mark: mark, plot: plot, cell: cell, colorbar: data.colorbar,
                                    labelsRight: labelsRight, titleAt: titleAt };
        });
    }

    return { drawChart: drawChart, drawGrid: drawGrid };
})();
