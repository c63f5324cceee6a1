"""What every feature of the viewer shares: the backend reading runs (discovery, caches, scores, tables, debug
pages, captured datapoints), the check of what the browser sends, the page's own ids and common components."""
