"""The Gradio inspector: layout, handlers, HTML rendering and plotly figures. No retrieval logic lives here."""
