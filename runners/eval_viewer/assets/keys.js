// j / k open the next / previous datapoint of the table (as the buttons do), unless the user is typing: a tick box
// or a button keeps the keys (a debugger just ticked is where the user looks next).
const UNTYPED_INPUTS = ["checkbox", "radio", "button", "submit", "reset", "range", "color", "file", "image"];
document.addEventListener("keydown", function (event) {
    const target = event.target;
    const typing = target && (target.isContentEditable || ["TEXTAREA", "SELECT"].includes(target.tagName)
        || (target.tagName === "INPUT" && !UNTYPED_INPUTS.includes(target.type)));
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    const button = { j: "next-datapoint", k: "prev-datapoint" }[event.key];
    if (button && document.getElementById(button)) { document.getElementById(button).click(); }
});
