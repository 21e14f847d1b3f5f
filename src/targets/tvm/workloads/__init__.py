"""How a model becomes TVM tasks: the PyTorch -> Relax import and its fusion (:mod:`.relax_import`), an
ONNX file through TVM's ONNX frontend (:mod:`.onnx_import`), the tasks of a model with their TVM
workloads (:mod:`.tasks`), ``model=ops``'s operators as tensor expressions (:mod:`.operator_te`) and as a
one-operator model beside their PyTorch reference (:mod:`.operator_torch`)."""
