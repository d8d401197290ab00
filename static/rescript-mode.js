// A small ReScript mode for the student's code editor (static/code.js,
// docs/code.md "The page"): keywords, Capitalized constructors and modules,
// strings, template strings, comments, numbers and operators, enough to read
// the lesson's ToolCall.res. A classic script loaded after CodeMirror and its
// addon/mode/simple.js (vendored), from the lab's own origin as the CSP
// wants; code.css gives the token colours their 4.5:1 contrast.
/* global CodeMirror */
(function () {
  "use strict";
  const keywords =
    /(?:let|switch|type|if|else|open|module|rec|and|when|try|catch|external|include|mutable|as|assert|for|while|in|to|downto|exception|private|constraint|of|lazy|async|await)\b/;
  CodeMirror.defineSimpleMode("rescript", {
    start: [
      { regex: /\/\/.*/, token: "comment" },
      { regex: /\/\*/, token: "comment", next: "comment" },
      { regex: /"(?:[^\\"]|\\.)*?(?:"|$)/, token: "string" },
      { regex: /`/, token: "string", next: "template" },
      { regex: /'(?:[^\\']|\\.)'/, token: "string" },
      { regex: /(let|type|module|external)(\s+)(rec\s+)?([a-z_][\w']*)/, token: ["keyword", null, "keyword", "def"] },
      { regex: keywords, token: "keyword" },
      { regex: /(?:true|false)\b/, token: "atom" },
      { regex: /[A-Z][\w']*/, token: "variable-2" },
      { regex: /0[xX][0-9a-fA-F_]+n?|0[oO][0-7_]+|0[bB][01_]+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d+)?n?/, token: "number" },
      { regex: /=>|->|\.\.\.|===|!==|==|!=|<=|>=|&&|\|\||\+\+|:=|[-+*/=<>!|&^~?:@#]/, token: "operator" },
      { regex: /[{[(]/, indent: true },
      { regex: /[}\])]/, dedent: true },
      { regex: /[a-z_][\w']*/, token: "variable" },
    ],
    comment: [
      { regex: /.*?\*\//, token: "comment", next: "start" },
      { regex: /.*/, token: "comment" },
    ],
    template: [
      { regex: /(?:[^\\`]|\\.)*?`/, token: "string", next: "start" },
      { regex: /.*/, token: "string" },
    ],
    meta: {
      dontIndentStates: ["comment", "template"],
      electricInput: /^\s*[}\])]$/,
      lineComment: "//",
      blockCommentStart: "/*",
      blockCommentEnd: "*/",
    },
  });
})();
