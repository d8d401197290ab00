// The module's top level never ends.
for (;;) {}
export function begin(runId, callId) { return { runId, callId }; }
export function receive(call, raw) { return { call, notice: "" }; }
export function expire(call) { return { call, notice: "" }; }
export function view(call) { return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
