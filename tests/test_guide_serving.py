"""The guide's serving paragraph: what a deployer of a trained classifier needs beyond loading it."""

from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"


def test_the_guide_says_how_to_serve_a_model_scripting_threads_and_empty_text():
    """torch.jit.script fails on the model, the adaptive thread policy's count is the process's (threads.py says
    concurrent forwards should use the fixed policy, which the guide did not), and an empty text is classified where
    finetuning refuses it: a deployer learned each only by trying it or reading the shipped source."""
    text = GUIDE.read_text()
    start = text.index("**Serving.**")
    serving = " ".join(text[start:].split("\n\n")[0].split())
    for words in ("`torch.jit.script` does not take the model", "`torch.jit.trace`", "`torch.export`",
                  "`LINFORMER_CPU_THREADS=fixed`", "An empty or blank text is classified",
                  "a service should refuse empty input itself"):
        assert words in serving, words
