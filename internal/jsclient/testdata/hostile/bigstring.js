// view returns a 10 MB detail.
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) { return { call, notice: "" }; }
export function expire(call) { return { call, notice: "" }; }
export function view(call) {
  return { runId: call.runId, callId: call.callId, status: "Pending", detail: "x".repeat(10 * 1024 * 1024) };
}
