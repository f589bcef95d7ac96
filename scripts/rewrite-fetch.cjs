// Preloaded (`node --require`) into an MCP server that hard-codes its API's https URL, for
// scripts/real-mcp-servers: Node's built-in fetch is wrapped so that a URL starting with
// DW_REWRITE_FROM goes to DW_REWRITE_TO instead (driftwatch's reverse proxy). Nothing else of
// the request changes. The forward proxy (HTTPS_PROXY) is the way without a preload.
"use strict";
const from = process.env.DW_REWRITE_FROM;
const to = process.env.DW_REWRITE_TO;
const fetch = globalThis.fetch;
if (from && to && typeof fetch === "function") {
  globalThis.fetch = function rewritten(input, init) {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(from)) {
      const moved = to + url.slice(from.length);
      input = typeof input === "string" || input instanceof URL ? moved : new Request(moved, input);
    }
    return fetch(input, init);
  };
}
