"""What NumPy users hand over by habit (issue 43): masked arrays and other subclasses, NumPy's
``kind=``, ``axis=`` and ``order=``, and dtypes gpusort does not sort, each with its own hint.
The client follows NumPy where the meaning is the same and refuses clearly where it is not:
never a silent difference."""

from __future__ import annotations

import numpy as np
import pytest

from _data import keys, same_bytes, same_values


def same_masked(x, y) -> bool:
    """Equal masked arrays: the same mask, and the same values where unmasked."""
    return (isinstance(x, np.ma.MaskedArray) and isinstance(y, np.ma.MaskedArray)
            and np.array_equal(np.ma.getmaskarray(x), np.ma.getmaskarray(y))
            and np.array_equal(x.compressed(), y.compressed(), equal_nan=True))


def test_masked_arrays_sort_as_numpy_sorts_them(any_client):
    # The example: [3 1 2 --] came back [0 1 2 3], the masked 0 sorted as a value.
    a = np.ma.array([3, 1, 2, 0], mask=[0, 0, 0, 1])
    got = any_client.sort(a)
    assert same_masked(got, np.sort(a)) and str(got) == "[1 2 3 --]"
    assert np.array_equal(any_client.argsort(a), np.argsort(a))
    assert same_masked(a, np.ma.array([3, 1, 2, 0], mask=[0, 0, 0, 1])), "the input is kept"


def ref_masked_argsort(a) -> np.ndarray:
    """np.ma.argsort's order with the masked values strictly last: the unmasked values' stable
    order, then the masked ones by position. NumPy fills masked values with the type's largest
    value (NaN for floats) and documents the order among ties with those as undefined."""
    mask = np.ma.getmaskarray(a)
    shown = np.flatnonzero(~mask)
    return np.concatenate([shown[np.argsort(np.ma.getdata(a)[shown], kind="stable")],
                           np.flatnonzero(mask)])


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.dtype(">f8")],
                         ids=["i64", "f32", "be-f8"])
def test_masked_arrays_of_many_keys(any_client, rng, dtype):
    data = keys(dtype, 100_000, rng)
    a = np.ma.array(data, mask=rng.random(data.size) < 0.3, fill_value=7)
    order = ref_masked_argsort(a)
    got = any_client.sort(a, stable=True)
    assert same_bytes(np.ma.getdata(got), data[order])
    assert np.array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(a)[order])
    assert same_bytes(got.compressed(), np.sort(a, kind="stable").compressed()), "NumPy's"
    assert got.fill_value == a.fill_value, "a copy of the array, as np.sort makes"
    assert np.array_equal(any_client.argsort(a), order)
    # Descending: the unmasked values from the largest, the masked still last.
    down = any_client.sort(a, descending=True)
    assert np.array_equal(np.ma.getmaskarray(down), np.arange(a.size) >= a.count())
    assert same_values(down.compressed(), any_client.sort(a.compressed(), descending=True))


def test_masked_in_place_nothing_masked_and_by_key(client):
    a = np.ma.array([5.0, 2.0, 9.0, 1.0], mask=[0, 1, 0, 0])
    assert client.sort(a, inplace=True) is a
    assert same_masked(a, np.ma.array([1.0, 5.0, 9.0, 2.0], mask=[0, 0, 0, 1]))
    plain = np.ma.array([3, 1, 2])  # a masked array with no mask at all
    got = client.sort(plain)
    assert isinstance(got, np.ma.MaskedArray) and np.array_equal(got, [1, 2, 3])
    assert got.mask is np.ma.nomask
    k = np.ma.array([3, 1, 2], mask=[1, 0, 0])
    names = np.array(["c", "a", "b"])
    sk, sn = client.sort_by_key(k, names)
    assert same_masked(sk, np.ma.array([1, 2, 3], mask=[0, 0, 1]))
    assert list(sn) == ["a", "b", "c"]


def test_masked_arrays_are_refused_where_the_mask_would_be_lost(client):
    m = np.ma.array([3, 1, 2], mask=[0, 1, 0], dtype=np.uint32)
    with pytest.raises(TypeError, match="masked array"):
        client.sort_pairs(m, np.arange(3, dtype=np.uint32))
    with pytest.raises(TypeError, match="masked array"):
        client.sort_pairs(np.arange(3, dtype=np.uint32), m)
    with pytest.raises(TypeError, match="masked array"):
        client.array(m)


class Tagged(np.ndarray):
    """A subclass with an attribute, as astropy's Quantity carries a unit."""

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", None)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix's own
def test_subclasses_come_back_as_themselves(client, rng):
    a = keys(np.float64, 1000, rng).view(Tagged)
    a.tag = "metres"
    got = client.sort(a)
    assert type(got) is Tagged and got.tag == "metres"
    assert same_values(got.view(np.ndarray), np.sort(a.view(np.ndarray)))
    sk, sv = client.sort_pairs(a, np.arange(1000, dtype=np.int64))
    assert type(sk) is Tagged and sk.tag == "metres"
    with pytest.raises(ValueError, match="1-D"):
        client.sort(np.matrix([[3, 1, 2]]))


def test_kind_as_numpy_reads_it(client, rng):
    a = keys(np.float32, 50_000, rng)
    for kind in ("stable", "mergesort", "S", "m"):
        assert same_bytes(client.sort(a, kind=kind), np.sort(a, kind="stable")), kind
    for kind in ("quicksort", "heapsort", "q", None):
        assert same_values(client.sort(a, kind=kind), np.sort(a)), kind
        assert np.array_equal(client.argsort(a, kind=kind), np.argsort(a, kind="stable"))
    k, v = client.sort_pairs(a, np.arange(a.size, dtype=np.int64), kind="stable")
    assert np.array_equal(v, np.argsort(a, kind="stable"))
    with pytest.raises(ValueError, match="sort kind must be one of"):
        client.sort(a, kind="bogo")
    with pytest.raises(ValueError, match="sort kind must be one of"):
        client.argsort(a, kind="bogo")
    with pytest.raises(ValueError, match="structured"):
        client.sort(a, order="x")


def test_axis_as_numpy_reads_it(client, rng):
    a = keys(np.int64, 10_000, rng)
    for axis in (-1, 0):
        assert np.array_equal(client.sort(a, axis=axis), np.sort(a, axis=axis))
        assert np.array_equal(client.argsort(a, axis=axis), np.argsort(a, axis=axis,
                                                                        kind="stable"))
    grid = a.reshape(100, 100)
    assert np.array_equal(client.sort(grid, axis=None), np.sort(grid, axis=None))
    assert np.array_equal(client.argsort(grid, axis=None),
                          np.argsort(grid, axis=None, kind="stable"))
    # np.exceptions.AxisError since NumPy 1.25; NumPy 2 dropped the np.AxisError alias.
    with pytest.raises(getattr(np, "exceptions", np).AxisError):
        client.sort(a, axis=1)
    with pytest.raises(ValueError, match="each row"):
        client.sort(grid)  # np.sort sorts each row: not what gpusort does, so refused
    with pytest.raises(ValueError, match="each row"):
        client.sort(grid, axis=-1)


@pytest.mark.parametrize("dtype, hint", [
    (np.float16, "astype(np.float32)"),
    (np.longdouble, "astype(np.float64) sorts the values rounded"),
    (np.int16, "astype(np.int32)"),
    (np.uint8, "astype(np.uint32)"),
    (np.dtype("M8[s]"), "NaT"),
], ids=["float16", "float128", "int16", "uint8", "datetime64"])
def test_each_dtype_gets_its_own_hint(client, dtype, hint):
    # Issue 43: float128 was told to "convert float16 with a.astype(np.float32)".
    with pytest.raises(TypeError, match="gpusort cannot sort") as e:
        client.sort(np.zeros(3, dtype=dtype))
    assert hint in str(e.value)
    if np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize > 8:
        assert "float16" not in str(e.value)
