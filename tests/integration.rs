//! Integration tests: one binary, one module per area, shared helpers in `util`.

mod integration {
    pub mod util;
    pub mod real_specs;
}
