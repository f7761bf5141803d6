#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| openwop_sidecar_fuzz::checks::request_state(data));
