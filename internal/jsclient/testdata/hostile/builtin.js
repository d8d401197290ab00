// view makes one builtin call (JSON.stringify) write a terabyte: no
// interrupt reaches it, so only the sandbox's caps can stop it.
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) { return { call, notice: "" }; }
export function expire(call) { return { call, notice: "" }; }
export function view(call) {
  const mb = "x".repeat(1 << 20);
  const huge = JSON.stringify(new Array(1 << 20).fill(mb));
  return { runId: call.runId, callId: call.callId, status: "Pending", detail: huge };
}
