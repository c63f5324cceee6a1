// j / k open the next / previous datapoint of the table (as the buttons do), and an element with a ``data-key``
// attribute takes that key (a tag chip toggles its tag, the tag box is focused), wherever the focus is, unless the user
// is typing or is in an open dropdown (its button, search box or options). The keys are taken in the capture phase, before
// the element with the focus sees them: the table (AG Grid) keeps the focus after a row is clicked and stops the keys
// it is given. A tick box or a button keeps the keys (a debugger just ticked
// is where the user looks next), and so does a dropdown once a choice is made: closed, it keeps the focus and, when
// the key comes up, opens its search box with the key typed in it, so it is blurred first and the key comes up
// elsewhere.
const UNTYPED_INPUTS = ["checkbox", "radio", "button", "submit", "reset", "range", "color", "file", "image"];
const CLOSED_DROPDOWN = "button.dash-dropdown[aria-expanded='false']";
const OPEN_DROPDOWN = ".dash-dropdown-content, button.dash-dropdown[aria-expanded='true']";
window.addEventListener("keydown", function (event) {
    const target = event.target;
    const typing = target && (target.isContentEditable || ["TEXTAREA", "SELECT"].includes(target.tagName)
        || (target.tagName === "INPUT" && !UNTYPED_INPUTS.includes(target.type))
        || (target.closest && target.closest(OPEN_DROPDOWN)));
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    const id = { j: "next-datapoint", k: "prev-datapoint" }[event.key];
    const button = id ? document.getElementById(id) : document.querySelector(`[data-key="${CSS.escape(event.key)}"]`);
    if (!button) { return; }
    const dropdown = target.closest && target.closest(CLOSED_DROPDOWN);
    if (dropdown) { dropdown.blur(); }
    event.stopPropagation();
    const box = button.tagName === "BUTTON" ? null : button.querySelector("input");
    if (box) {  // a box to type in (t: the tag's name): focused, the key not typed into it
        event.preventDefault();
        box.focus();
    } else {
        button.click();
    }
}, true);
