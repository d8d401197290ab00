// receive recurses without end.
export function begin(runId, callId) { return { runId, callId }; }
function deeper(n) {
  return deeper(n + 1) + 1;
}
export function receive(call, raw) {
  return { call, notice: String(deeper(0)) };
}
export function expire(call) { return { call, notice: "" }; }
export function view(call) { return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
