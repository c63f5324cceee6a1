#!/usr/bin/env bash
# Builds assets/plotly-viewer.min.js: plotly.js with only the traces the viewer draws (1.7 MB instead of the
# 4.8 MB full bundle, which took the browser ~3 s of a 5 s page load on a busy machine). Dash's graphs use
# window.Plotly when a page script sets it, so the full bundle is then never fetched.
#
# Rerun after upgrading the plotly Python package (keep the version below equal to
# `python -c "from plotly.offline import get_plotlyjs_version as v; print(v())"`) or when a figure uses a new
# trace type (the browser tests fail on a trace type the bundle lacks). Needs node and npm.
#     bash runners/eval_viewer/build_plotly_bundle.sh
set -euo pipefail
PLOTLY_JS=4.1.1  # also SLIM_PLOTLY_JS_VERSION in app.py: the viewer serves the bundle only with that plotly.js
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm install --silent --no-audit --no-fund --ignore-scripts "plotly.js@$PLOTLY_JS" buffer@6 esbuild@0.25 >/dev/null
cat > entry.js <<'JS'
var Plotly = require('plotly.js/lib/core');  // scatter is in the core
Plotly.register([
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/heatmap'),
    require('plotly.js/lib/histogram'),
    require('plotly.js/lib/image'),
    require('plotly.js/lib/scattergl'),  // the Embeddings map: 100,000 points drawn by WebGL
    require('plotly.js/lib/table'),
]);
window.Plotly = Plotly;
JS
./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife --target=es2017 --loader:.css=empty --define:global=window \
    --legal-comments=eof --log-level=warning --outfile="$here/assets/plotly-viewer.min.js"
echo "wrote $here/assets/plotly-viewer.min.js (plotly.js $PLOTLY_JS)"
