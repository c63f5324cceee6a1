"""The eval viewer: a Dash app to browse runs, epochs, failing datapoints and their debug outputs.

One folder per feature, each holding its ids and what the browser may send them (``ids.py``), its data and view,
and its callbacks (``callbacks.py``, declaring its ``FEATURE``); ``app.py`` assembles them from one list:

    controls/        the run, epoch and metric pickers, the epoch's badges, the refresh as runs grow
    table/           the datapoint table: rows served a block at a time, typed filters, chips, columns, j / k
    scores/          the score chart (the metric over epochs) and the score grid
    address/         the view in the address bar, and named views of a run
    pictures/        thumbnails and gallery tiles, served by address
    export/          the HTML report (``python -m runners.eval_viewer.export``) and the Export button
    datapoint/       the Datapoint tab: inputs, labels, meta info, Debug Outputs (the seed's ``display_*``)
    gallery/         the Gallery tab
    compare_epochs/  the Compare epochs tab
    compare_runs/    the Compare runs tab: run against run, one datapoint in both
    model_report/    the Model report tab
    failures/        the Failures tab and the verification of its findings
    training/        the Training tab

Shared by them: ``shared/`` (the backend reading runs with its caches, the check of what the browser sends, the
page's own ids, common components) and ``figures/`` (the figures of every output kind, registered once in
``figures/registry.py``). ``page.py`` lays out the page; ``backend/initialization.py`` is the seed's place of
``load_debug_outputs``.
"""
