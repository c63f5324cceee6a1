#!/usr/bin/env bash
# Builds assets/bootstrap.min.css: Bootstrap's stylesheet (the version dash-bootstrap-components is made for), cut
# by PurgeCSS to the rules the viewer's page can use, so the page's one render-blocking stylesheet stays small
# (232 kB whole). A rule is kept when a class or element it names appears in the viewer's code or in
# dash-bootstrap-components' bundle, or matches the safelist: the classes dbc builds from a colour ("alert-" +
# color) and the elements Bootstrap's reboot styles. Needs node and npm (the npm registry); run it after
# upgrading dash-bootstrap-components, or when the viewer uses a Bootstrap class it did not use before:
#     bash runners/eval_viewer/build_bootstrap_css.sh
set -euo pipefail
BOOTSTRAP=5.3.6  # dash_bootstrap_components.themes.BOOTSTRAP names it
PURGECSS=7
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dbc_js="$(python -c 'import dash_bootstrap_components, os; print(os.path.join(os.path.dirname(dash_bootstrap_components.__file__), "_components", "dash_bootstrap_components.min.js"))')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "bootstrap@$BOOTSTRAP" > /dev/null
tar xzf "bootstrap-$BOOTSTRAP.tgz"
npm install --silent --no-audit --no-fund "purgecss@$PURGECSS" > /dev/null
# dbc builds these from a colour prop ("alert-" + color), so no file names them whole; reboot styles these elements
colours="primary secondary success danger warning info light dark"
safelist=(show fade active disabled navbar-dark navbar-light navbar-expand navbar-expand-md
          html body h1 h2 h3 h4 h5 h6 p a b strong small pre code table th td tr thead tbody label button input select
          textarea img svg hr ul ol li figure figcaption details summary section header nav span div)
for colour in $colours; do
  safelist+=("alert-$colour" "bg-$colour" "text-bg-$colour" "btn-$colour" "text-$colour")
done
mkdir out
npx purgecss --safelist "${safelist[@]}" --css package/dist/css/bootstrap.min.css --output out \
    --content "$root/runners/eval_viewer/**/*.py" "$root/runners/eval_viewer/assets/*.js" "$root/data/viewer/**/*.py" \
    "$dbc_js" > /dev/null
{
  sed '/sourceMappingURL/d' out/bootstrap.min.css  # Bootstrap's licence comment first, after its @charset
  printf '\n/* cut to the rules the Lantern viewer uses by runners/eval_viewer/build_bootstrap_css.sh */\n'
} > "$here/assets/bootstrap.min.css"
echo "wrote $here/assets/bootstrap.min.css ($(wc -c < "$here/assets/bootstrap.min.css") bytes)"
