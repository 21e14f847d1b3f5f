"""Typed configuration (layer 0): how a knob is declared (:mod:`.knobs`), how composed or saved config
data becomes typed settings objects with one-line errors (:mod:`.load`), and the harness's own
settings (:mod:`.experiment`). Each method, model and target declares its settings in its own package."""
