"""Placeholder page until the full inspector lands: one turn box, the level and the final cards."""

from __future__ import annotations

import html

import gradio as gr

from retrieval.pipeline import get_retriever
from retrieval.settings import Settings

HEADER = ("**Hybrid retrieval inspector**: 100% synthetic data, not a medical device, "
          "not medical advice.")


def run_turn(text: str) -> str:
    settings = Settings.from_env()
    result = get_retriever(settings).retrieve(text, settings)
    rows = "".join(f"<li>{html.escape(h.parent_id)}</li>" for h in result.final)
    return (f"<p><b>{html.escape(result.hybrid_path)}</b>: {html.escape(result.reason)}</p><ol>{rows}</ol>")


def build_app() -> gr.Blocks:
    with gr.Blocks(title="Hybrid retrieval inspector") as app:
        gr.Markdown(HEADER)
        query = gr.Textbox(label="Turn", elem_id="query")
        run = gr.Button("Run", elem_id="run")
        out = gr.HTML(elem_id="hybrid-path")
        run.click(run_turn, query, out)
    return app
