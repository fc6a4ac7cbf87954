from analyzers.hardware import DEVICES, device_for_target, dtype_class, get_device, parse_hardware_overrides

NUMBERS = ("hbm_tbps", "peak_tflops", "sm_count", "l2_mb", "clock_ghz", "launch_overhead_us", "bw_efficiency",
           "matmul_efficiency", "l2_tbps")


def test_table_has_the_devices_with_provenance_for_every_number():
    for name in ("A100", "H100", "H200", "B200", "MI300X", "Trainium2"):
        hw = DEVICES[name]
        for f in NUMBERS:
            assert hw.provenance.get(f), f"{name}.{f} has no provenance"
        assert 0 < hw.bw_efficiency <= 1 and 0 < hw.matmul_efficiency <= 1
    assert DEVICES["H200"].hbm_tbps == 4.8 and DEVICES["H200"].peak("bfloat16") == DEVICES["H100"].peak("fp16")
    assert DEVICES["A100"].peak("fp8") == DEVICES["A100"].peak("fp16")  # no fp8 units: falls back to fp16 peak


def test_targets_map_to_default_devices():
    assert device_for_target("sm_90").name == "H200"
    assert device_for_target("sm_80").name == "A100"
    assert device_for_target("sm_100").name == "B200"
    assert device_for_target("gfx942").name == "MI300X"
    assert device_for_target("sm_89") is None and device_for_target("nonsense") is None
    assert get_device("h100").name == "H100" and get_device("hopper").name == "H200"
    assert DEVICES["H100"].target_spec.shared_per_block == 227 * 1024
    assert dtype_class("torch.bfloat16") == "fp16" and dtype_class("fp8e4nv") == "fp8"


def test_overrides_add_and_adjust_devices():
    table, errors = parse_hardware_overrides({"my-accel": {"base": "H100", "hbm_tbps": 2.0,
                                                           "peak_tflops": {"bf16": 500}},
                                              "H200": {"bw_efficiency": 0.85}})
    assert errors == []
    mine = table["my-accel"]
    assert mine.hbm_tbps == 2.0 and mine.peak("fp16") == 500 and mine.sm_count == 132
    assert mine.provenance["hbm_tbps"] == "user setting"
    assert table["H200"].bw_efficiency == 0.85 and DEVICES["H200"].bw_efficiency != 0.85


def test_bad_overrides_are_reported_and_the_rest_applies():
    table, errors = parse_hardware_overrides({"x": {"hbm_tbps": 2.0}, "y": {"base": "A100", "hbm_tbps": -1,
                                                                           "sm_count": 100, "colour": "red"},
                                              "z": "fast"})
    assert "x" not in table and table["y"].sm_count == 100 and table["y"].hbm_tbps == DEVICES["A100"].hbm_tbps
    text = "\n".join(errors)
    assert "'x'" in text and "base" in text and "hbm_tbps must be a positive number" in text
    assert "unknown field 'colour'" in text and "'z' must be an object" in text
    assert parse_hardware_overrides([1, 2])[1]
