#![no_main]
use libfuzzer_sys::fuzz_target;

// Counts this thread's live allocations, so the target can bound the parser's memory.
#[global_allocator]
static ALLOC: openwop_sidecar_fuzz::checks::Counting = openwop_sidecar_fuzz::checks::Counting;

fuzz_target!(|data: &[u8]| openwop_sidecar_fuzz::checks::sse_chunking(data));
