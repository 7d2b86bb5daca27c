// Inline forms come back with HTTP 422 when they carry validation errors; htmx
// leaves 4xx responses unswapped unless told to swap them.
document.addEventListener("htmx:beforeSwap", function (event) {
  if (event.detail.xhr.status === 422) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// The degrade form: ticking a lever means "only the levers ticked", and "every lever"
// ticks them all, so the boxes always show which levers act; a hedge delay typed in
// milliseconds picks "a fixed time".
document.addEventListener("change", function (event) {
  var input = event.target;
  var form = input.closest ? input.closest(".degrade-form") : null;
  if (!form) return;
  if (input.name === "levers") {
    var chosen = form.querySelector('input[name="levers_mode"][value="chosen"]');
    if (chosen) chosen.checked = true;
  } else if (input.name === "levers_mode" && input.value === "all") {
    form.querySelectorAll('input[name="levers"]').forEach(function (box) { box.checked = true; });
  }
});
document.addEventListener("input", function (event) {
  var input = event.target;
  if (input.name !== "hedge_after_ms" || !input.value.trim()) return;
  var select = input.form ? input.form.querySelector('select[name="hedge_after"]') : null;
  if (select && select.value === "") select.value = "ms";
});
