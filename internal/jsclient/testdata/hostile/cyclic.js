// view returns an object that contains itself.
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) { return { call, notice: "" }; }
export function expire(call) { return { call, notice: "" }; }
export function view(call) {
  const shown = { runId: call.runId, callId: call.callId, status: "Pending", detail: "" };
  shown.self = shown;
  return shown;
}
