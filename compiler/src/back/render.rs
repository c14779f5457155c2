//! askama templates (`compiler/templates/`) over the view model.

use askama::Template;

use super::GenError;
use super::model::ModuleView;

#[derive(Template)]
#[template(path = "module.rs.jinja", escape = "none")]
struct ModuleTemplate<'a> {
    family: &'a str,
    family_lit: &'a str,
    spec_path_lit: &'a str,
    sha256_lit: &'a str,
    description: &'a Option<String>,
    quantities: &'a [super::model::ConstView],
    constants: &'a [super::model::ConstView],
    regions: &'a [super::model::RegionView],
    arena_regions: &'a [String],
    arena_align: &'a str,
    arena_docs: &'a [String],
    arena_bytes: &'a str,
    session_bytes: &'a str,
    process_bytes: &'a str,
    arena_asserts: &'a [String],
    callables: &'a [super::model::CallableView],
    batch: &'a super::batch::BatchView,
    operating_points: &'a [super::model::OperatingPointView],
}

/// The module's items as unformatted Rust source.
pub fn module(v: &ModuleView) -> Result<String, GenError> {
    ModuleTemplate {
        family: &v.family,
        family_lit: &v.family_lit,
        spec_path_lit: &v.spec_path_lit,
        sha256_lit: &v.sha256_lit,
        description: &v.description,
        quantities: &v.quantities,
        constants: &v.constants,
        regions: &v.regions,
        arena_regions: &v.arena_regions,
        arena_align: &v.arena_align,
        arena_docs: &v.arena_docs,
        arena_bytes: &v.arena_bytes,
        session_bytes: &v.session_bytes,
        process_bytes: &v.process_bytes,
        arena_asserts: &v.arena_asserts,
        callables: &v.callables,
        batch: &v.batch,
        operating_points: &v.operating_points,
    }
    .render()
    .map_err(GenError::Template)
}
