//! What `driftwatch wrap` runs beside the sidecar: the relay of a stdio MCP server's two
//! streams, the front of an HTTP one, the live catalog check of the tools either lists, and
//! what a server behind the forward proxy is told to trust. Each reads MCP messages with the
//! pure `mcp` core (calls in flight, bounds) and hands the calls to the sidecar's attribution.

pub mod front;
pub mod live;
pub mod relay;
