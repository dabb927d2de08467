"""A tiny stand-in for a vLLM checkout: one kernel file whose post-load store is an escape its
apply reads (RL101), and an allowlist, written by the test, that accepts exactly that site, so a
test can tell whether an allowlist was applied. The shipped allowlists/vllm.toml cannot serve:
it holds no entry for the releases audited (its header says why)."""

from __future__ import annotations

from pathlib import Path

REL = "vllm/model_executor/kernels/linear/scratch_probe.py"
CLS = "ScratchProbeKernel"
ATTR = "probe_scratch"


def write_checkout(root: Path) -> str:
    """Write the checkout under root; returns the kernel file's project-relative path."""
    kernel = root / REL
    kernel.parent.mkdir(parents=True, exist_ok=True)
    for d in [kernel.parent, *kernel.parent.parents]:
        if d == root:
            break
        (d / "__init__.py").touch()
    kernel.write_text(
        "import torch\n\n\n"
        f"class {CLS}:\n"
        "    def process_weights_after_loading(self, layer):\n"
        f"        layer.{ATTR} = torch.empty(8)\n\n"
        "    def apply_weights(self, layer, x):\n"
        f"        return layer.{ATTR} + x\n",
        encoding="utf-8",
    )
    return REL


def accepting_allowlist() -> str:
    """An allowlist (TOML text) whose one entry accepts the checkout's store."""
    return (
        '[meta]\ncodebase = "vllm"\n\n[[allow]]\nrule = "RL101"\n'
        f'path = "{REL}"\nsymbol = "{CLS}.process_weights_after_loading"\n'
        f'target = "layer.{ATTR}"\nreason = "the probe scratch of this test"\n'
        'link = "https://example.invalid/scratch-probe"\n'
    )


def bundle_accepting_allowlist(monkeypatch, folder: Path) -> None:
    """Make FOLDER the bundled allowlists/ folder (rules.data_dir, the one lookup the wheel and
    a checkout share), holding a vllm.toml that accepts the checkout's store; the other data
    folders (rules/) stay where they are."""
    from reload_lint import rules

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vllm.toml").write_text(accepting_allowlist(), encoding="utf-8")
    real = rules.data_dir
    monkeypatch.setattr(
        rules, "data_dir", lambda name: folder if name == "allowlists" else real(name)
    )
