"""The viewer's tables served a block of rows at a time (AG Grid's infinite row model through dash-ag-grid): their
rows shown after an answer of no rows.

dash-ag-grid (35.3) hands the grid an answer that follows one of 0 rows (a filter that matched nothing, or one that
could not be read) in a deferred call, which its own effect cancels as soon as it clears the answer it applied. The
grid then holds the new row count with no rows: every row drawn empty ('n/a', no idx), clicks opening nothing, and
the grid's loader counting that request as running for good: after two such answers it asks for no rows at all (Clear
filters then brings nothing back). And an answer is always applied to the grid's latest request: one that lands
after the grid asked again (new sides in Compare runs, a new filter) completes the newer request with the older rows,
and the newer answer then finds nothing to complete. So once an answer is applied, the browser looks at the grid:
rows counted where the rows last asked for have no data mean an answer was lost. It ends a request still loading as
failed (which frees the loader) and asks the grid to load its rows again; that answer follows one with rows, and
dash-ag-grid applies it.
"""

from __future__ import annotations

_RELOAD_AFTER_EMPTY = """function() {
    // Run whenever an answer lands or dash-ag-grid clears it (by then it reads null: the count is read from the
    // grid, once dash-ag-grid has applied the answer). Rows counted but none of them loaded is an answer lost:
    // a block still loading where the rows before were none, or nothing loading while the first row has no data
    // (an answer applied to a newer request, which then took the next answer as already had). A few asks in a row
    // at most: a server that keeps answering so is not asked for ever.
    const none = window.dash_clientside.no_update;
    let api = null;
    try { api = dash_ag_grid.getApi('GRID'); } catch (error) { return none; }
    setTimeout(() => {
        const counts = window.lanternRowCounts = window.lanternRowCounts || new WeakMap();
        const asked = window.lanternRowAsks = window.lanternRowAsks || new WeakMap();
        const previous = counts.get(api), count = api.getDisplayedRowCount();
        counts.set(api, count);
        const loading = Object.values(api.getCacheBlockState()).some(block => block.pageStatus === 'loading');
        const request = (window.dash_component_api.getLayout('GRID') || {props: {}}).props.getRowsRequest;
        const start = request && request.startRow < count ? request.startRow : 0;  // the rows last asked for
        const row = count > 0 ? api.getDisplayedRowAtIndex(start) : null;
        const lost = count > 0 && (loading ? previous === 0 : !(row && row.data));
        if (!lost || (asked.get(api) || 0) >= 3) {
            if (!lost) { asked.set(api, 0); }
            return;
        }
        asked.set(api, (asked.get(api) || 0) + 1);
        if (loading && request && typeof request.failCallback === 'function') { request.failCallback(); }
        api.refreshInfiniteCache();
    }, 0);
    return none;
}"""


def reload_after_empty_script(grid: str) -> str:
    """The browser's check, on each answer ``grid`` gets (``getRowsResponse``), that asks for its rows again where
    it lost an answer that followed one of no rows (see the module)."""
    return _RELOAD_AFTER_EMPTY.replace("GRID", grid)
