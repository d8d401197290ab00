// receive allocates ever larger arrays and keeps them all.
export function begin(runId, callId) { return { runId, callId }; }
const kept = [];
export function receive(call, raw) {
  let a = [0];
  for (;;) {
    a = a.concat(a, [kept.length]);
    kept.push(a);
  }
}
export function expire(call) { return { call, notice: "" }; }
export function view(call) { return { runId: call.runId, callId: call.callId, status: "Pending", detail: "" }; }
