"""Ids of the Embeddings tab, and what the browser sends them."""

from runners.eval_viewer.shared.sends import Sends, anything, list_of, record, text, whole

TAB_EMBEDDINGS = "tab-embeddings"
EMBEDDING_SPACE = "embedding-space"  # the feature space mapped (its key: 'debugger:<name>', 'summaries', ...)
EMBEDDING_COLOUR = "embedding-colour"  # what it is coloured by ('failure', 'column:<name>', 'tag:<name>', ...)
EMBEDDING_MAP = "embedding-map"  # the map (a WebGL scatter)
EMBEDDING_NOTE = "embedding-note"  # what the map is, or that it is being computed, or why not
EMBEDDING_POLL = "embedding-poll"  # ticks while a map is being computed
EMBEDDING_SHOWN = "embedding-shown"  # {run, epoch, space, colour, marks}: what the map shows (marks: the first mark)
EMBEDDING_SELECTION = "embedding-selection"  # {run, epoch, space, shape}: a box or lasso drawn on the map
EMBEDDING_SELECTION_NOTE = "embedding-selection-note"
EMBEDDING_OPEN = "embedding-open"  # the open datapoint, with "More like this"
EMBEDDING_OPEN_IDX = "embedding-open-idx"  # {idx}: the open idx, written only when it changes while the tab is shown
EMBEDDING_MORE = "embedding-more"  # button: the open datapoint's nearest neighbours
EMBEDDING_NEAR = "embedding-near"  # {of, idx}: the datapoint whose neighbours are listed, and theirs
EMBEDDING_NEIGHBOURS = "embedding-neighbours"  # the list
EMBEDDING_NEIGHBOUR = "embedding-neighbour"  # pattern-matching id type of a listed neighbour: {'type', 'idx'}
EMBEDDING_SHOW_DATAPOINT = "embedding-show-datapoint"  # button: the open datapoint in the Datapoint tab

SENDS: Sends = {
    (EMBEDDING_SPACE, "value"): text, (EMBEDDING_COLOUR, "value"): text,
    (EMBEDDING_SHOWN, "data"): record(run=text, epoch=text, space=text, colour=text, marks=whole),
    (EMBEDDING_SELECTION, "data"): record(run=text, epoch=text, space=text, shape=text),
    (EMBEDDING_NEAR, "data"): record(of=whole, idx=list_of(whole)),
    (EMBEDDING_OPEN_IDX, "data"): anything,  # {idx}: ``browser_input.datapoint_idx``
}
