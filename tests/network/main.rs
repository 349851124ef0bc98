//! Serving over HTTP and the studio: `serve --http` as clients see it, the TypeScript clients
//! and the Inspector over HTTP, HTTPS downstream, the official conformance suite, replicas
//! behind nginx, the studio's API and its page in a real browser. One test binary, a module per
//! subject.

#[path = "../common/mod.rs"]
mod common;

mod cancel;
mod conformance_suite;
mod http;
mod https_downstream;
mod real_clients;
mod scale_out;
mod served;
mod studio;
mod studio_browser;
mod traces;
