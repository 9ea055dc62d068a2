"""The rule data: facts about CUDA, torch_npu and third-party libraries as JSON tables, with their
schemas and the one loader that checks them (`tables`)."""
