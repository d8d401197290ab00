// Every call works for a while (a few ms), so that a check spends its
// whole 2 s budget and ends as an error: a slow program, not a hostile one.
function work() { let x = 0; for (let i = 0; i < 20000; i++) { x += i % 7; } return x; }
export function begin(runId, callId) { work(); return { runId, callId }; }
export function receive(call, raw) { work(); return { call, notice: "" }; }
export function expire(call) { work(); return { call, notice: "" }; }
export function view(call) { work(); return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
