"""The settings definition: validation, defaults, and what clients really send."""

from kernel_lsp.settings import Settings, parse_settings


def test_valid_values_are_normalised():
    s, messages = parse_settings({"select": ["tr", "NK001"], "severity": {"tr002": "HINT"}, "logLevel": "DEBUG"})
    assert messages == []
    assert s.select == ("TR", "NK001") and s.severity == {"TR002": "hint"} and s.log_level == "debug"
    assert s.severity_for("TR002") == "hint" and s.severity_for("TR001") is None


def test_each_invalid_value_falls_back_alone():
    s, messages = parse_settings({"ignore": "TR007", "maxFileBytes": -1, "watchFiles": "yes", "select": ["NK"]})
    assert s.ignore == () and s.max_file_bytes == Settings().max_file_bytes and s.watch_files is True
    assert s.select == ("NK",)
    assert len(messages) == 3 and all("using the default" in m for m in messages)


def test_unknown_keys_and_wrong_shapes():
    _, messages = parse_settings({"maxfilebytes": 5})
    assert messages == ["unknown kernel-lsp setting 'maxfilebytes' (did you mean 'maxFileBytes'?); ignored"]
    s, messages = parse_settings("nonsense")
    assert s == Settings() and "must be an object" in messages[0]


def test_section_wrapper_and_empty_lua_tables():
    s, messages = parse_settings({"kernelLsp": {"ignore": ["TR002"]}})
    assert s.ignore == ("TR002",) and messages == []
    for raw in ([], {"kernelLsp": []}, {"severity": []}):
        s, messages = parse_settings(raw)
        assert messages == [] and s == Settings()


def test_null_restores_the_default():
    base, _ = parse_settings({"ignore": ["TR002"]})
    s, _ = parse_settings({"ignore": None}, base)
    assert s.ignore == ()


def test_pins_take_types_values_and_launch_options():
    pins = {"x_ptr": "*bf16", "n": 4096, "BLOCK": 256, "num_warps": 8}
    s, messages = parse_settings({"pins": {"ops/add.py::add_kernel": pins}})
    assert messages == [] and s.pins == {"ops/add.py::add_kernel": pins}
    s, messages = parse_settings({"pins": {"add_kernel": pins}})  # the bare form: still applied, deprecated
    assert s.pins == {"add_kernel": pins} and len(messages) == 1 and "deprecated" in messages[0]
    for bad in ({"add_kernel": {"x_ptr": "*half"}}, {"add_kernel": ["x_ptr"]}, {"add_kernel": {"num_warps": 0}},
                {"not a name": {}}, ["add_kernel"]):
        s, messages = parse_settings({"pins": bad})
        assert s.pins == {} and len(messages) == 1 and "pins" in messages[0], bad


def test_settings_that_say_where_keys_go_are_taken_from_user_level_options_only():
    user, messages = parse_settings({"assistantBaseUrl": "https://gateway.example.com", "assistantApiKey": "k"})
    assert messages == [] and user.assistant_base_url == "https://gateway.example.com"
    # A repository's .vscode/settings.json or .dir-locals.el arrives as workspace/configuration.
    workspace, messages = parse_settings({"kernelLsp": {"assistantBaseUrl": "http://attacker.example",
                                                        "assistantApiKey": "theirs", "ignore": ["TR009"]}},
                                         user, user_level=False)
    assert workspace.assistant_base_url == "https://gateway.example.com" and workspace.assistant_api_key == "k"
    assert workspace.ignore == ("TR009",)  # the other settings still apply
    assert len(messages) == 2 and all("taken only from user-level settings" in m for m in messages)
    # The same value again (VS Code's answer repeats the user's machine-scoped value) is not worth a message.
    _, messages = parse_settings({"assistantBaseUrl": "https://gateway.example.com"}, user, user_level=False)
    assert messages == []


def test_vscode_gets_user_only_settings_machine_scoped():
    from kernel_lsp.docs import vscode_setting
    from kernel_lsp.settings import SETTINGS

    scoped = {s.key for s in SETTINGS if vscode_setting(s).get("scope") == "machine"}
    assert scoped == {"assistantBaseUrl", "assistantApiKey", "executor", "rayAddress"}
