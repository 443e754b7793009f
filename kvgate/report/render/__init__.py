"""The report's renderers: one module per format (`table`, `markdown`, `html`, `junit`, `json`), each
reading only the report model (report.document); `text` holds the wording they share and
`formats.render` picks one by name.
"""
