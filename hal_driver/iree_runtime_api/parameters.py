"""Parameter indices for both runtimes: npu-sim serves this project's `ParameterIndex`;
a stock context gets a stock index rebuilt from the same entries."""
from hal_driver.iree_runtime_api.stock import is_stock, stock
from hal_driver.io_parameters import ParameterProvider


def to_stock_provider(provider):
    if is_stock(provider):
        return provider
    if not isinstance(provider, ParameterProvider):
        raise TypeError(f"expected a ParameterProvider, got {type(provider).__name__}")
    index = stock.ParameterIndex()
    for key, entry in provider.index.items():
        metadata = entry.metadata.decode() if entry.metadata else None
        if entry.is_splat:
            index.add_splat(key, entry.splat_pattern, entry.length, metadata=metadata)
        else:
            index.add_buffer(key, entry.file_view, writable=entry.writable, metadata=metadata)
    return index.create_provider(scope=provider.scope)
