// Inline forms come back with HTTP 422 when they carry validation errors; htmx
// leaves 4xx responses unswapped unless told to swap them.
document.addEventListener("htmx:beforeSwap", function (event) {
  if (event.detail.xhr.status === 422) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
