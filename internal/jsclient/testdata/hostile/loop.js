// receive never returns.
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) {
  while (true) {}
}
export function expire(call) { return { call, notice: "" }; }
export function view(call) { return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
