// j / k open the next / previous datapoint of the table (as the buttons do), unless the user is typing.
document.addEventListener("keydown", function (event) {
    const target = event.target;
    const typing = target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    const button = { j: "next-datapoint", k: "prev-datapoint" }[event.key];
    if (button && document.getElementById(button)) { document.getElementById(button).click(); }
});
