"""The viewer's tables served a block of rows at a time (AG Grid's infinite row model through dash-ag-grid): their
rows shown after an answer of no rows.

dash-ag-grid (35.3) hands the grid an answer that follows one of 0 rows (a filter that matched nothing, or one that
could not be read) in a deferred call, which its own effect cancels as soon as it clears the answer it applied. The
grid then holds the new row count with no rows: every row drawn empty ('n/a', no idx), clicks opening nothing, and
the grid's loader counting that request as running for good: after two such answers it asks for no rows at all (Clear
filters then brings nothing back). So once an answer is applied, the browser looks at the grid: rows where there
were none and a block still loading mean the answer was lost. It ends that request as failed (which frees the
loader) and asks the grid to load its rows again; that answer follows one with rows, and dash-ag-grid applies it.
"""

from __future__ import annotations

_RELOAD_AFTER_EMPTY = """function() {
    // Run whenever an answer lands or dash-ag-grid clears it (by then it reads null: the count is read from the
    // grid, once dash-ag-grid has applied the answer). A block still loading then, where the rows before were
    // none, is the answer lost.
    const none = window.dash_clientside.no_update;
    let api = null;
    try { api = dash_ag_grid.getApi('GRID'); } catch (error) { return none; }
    setTimeout(() => {
        const counts = window.lanternRowCounts = window.lanternRowCounts || new WeakMap();
        const previous = counts.get(api), count = api.getDisplayedRowCount();
        counts.set(api, count);
        const loading = Object.values(api.getCacheBlockState()).some(block => block.pageStatus === 'loading');
        if (previous === 0 && count > 0 && loading) {
            const lost = (window.dash_component_api.getLayout('GRID') || {props: {}}).props.getRowsRequest;
            if (lost && typeof lost.failCallback === 'function') { lost.failCallback(); }
            api.refreshInfiniteCache();
        }
    }, 0);
    return none;
}"""


def reload_after_empty_script(grid: str) -> str:
    """The browser's check, on each answer ``grid`` gets (``getRowsResponse``), that asks for its rows again where
    it lost an answer that followed one of no rows (see the module)."""
    return _RELOAD_AFTER_EMPTY.replace("GRID", grid)
