// Enter in a slider's number box applies the value (RRF k and every slider of the drawer): Gradio's slider
// applies a typed number only on blur (its "release" event), so Enter leaves the box, as Tab does.
document.addEventListener("keydown", (event) => {
  const box = event.target;
  if (event.key !== "Enter" || event.isComposing || !(box instanceof HTMLInputElement)) return;
  if (box.type !== "number" || !box.closest(".tab-like-container")) return;
  event.preventDefault();
  box.blur();
}, true);
