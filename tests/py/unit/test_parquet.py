"""The prep box's parquet writer (prep/volume/parquetwrite.py) and the bundle's footer reader
(twgrpo/formats/parquet.py), with pyarrow as the oracle of both."""
import struct

import pyarrow.parquet as pq
import pytest
from prep.volume import parquetwrite
from twgrpo.formats import parquet


def rows(n):
    return [{"data_source": "openai/gsm8k",
             "prompt": [{"role": "user", "content": f"What is {i} + {i}? ✓"}] * (i % 3),
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
             "extra_info": {"split": "train", "index": i, "answer": f"#### {2 * i}", "question": "q"}}
            for i in range(n)]


@pytest.mark.parametrize("count", [1, 7, 2000])
def test_pyarrow_reads_back_exactly_what_was_written(tmp_path, count):
    path = tmp_path / "t.parquet"
    parquetwrite.write_table(path, parquetwrite.VERL_GSM8K_FIELDS, rows(count))
    assert pq.read_table(path).to_pylist() == rows(count)
    assert pq.read_metadata(path).num_rows == count


def test_the_footer_reader_agrees_with_pyarrow_on_files_pyarrow_wrote(tmp_path):
    import pyarrow as pa
    path = tmp_path / "arrow.parquet"
    pq.write_table(pa.Table.from_pylist(rows(1000)), path, row_group_size=300)
    footer = parquet.read_footer(path)
    meta = pq.read_metadata(path)
    assert footer.num_rows == meta.num_rows == 1000
    assert footer.row_group_rows == [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert footer.columns == parquetwrite.VERL_COLUMNS
    assert footer.created_by == meta.created_by
    # nested fields by path, as pyarrow's schema names them (list levels included)
    leaves = {meta.schema.column(i).path for i in range(meta.num_columns)}
    assert leaves <= set(footer.paths) and "reward_model.ground_truth" in leaves


def test_writing_is_byte_for_byte_reproducible(tmp_path):
    parquetwrite.write_table(tmp_path / "a", parquetwrite.VERL_GSM8K_FIELDS, rows(50))
    parquetwrite.write_table(tmp_path / "b", parquetwrite.VERL_GSM8K_FIELDS, rows(50))
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


@pytest.mark.parametrize("damage,message", [
    (lambda b: b[:-1], "no PAR1 magic"),
    (lambda b: b[:8], "too short"),
    (lambda b: b[:-8] + struct.pack("<I", 10 ** 9) + b"PAR1", "does not fit"),
    (lambda b: b[:-40] + b"\xff" * 32 + b[-8:], "does not decode"),
])
def test_a_damaged_footer_is_an_error_not_a_crash(tmp_path, damage, message):
    path = tmp_path / "t.parquet"
    parquetwrite.write_table(path, parquetwrite.VERL_GSM8K_FIELDS, rows(5))
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(parquet.ParquetError, match=message):
        parquet.read_footer(path)


def test_the_writer_refuses_a_value_of_the_wrong_type(tmp_path):
    bad = rows(1)
    bad[0]["extra_info"]["index"] = "0"
    with pytest.raises(ValueError, match="extra_info.index: expected an integer"):
        parquetwrite.write_table(tmp_path / "t", parquetwrite.VERL_GSM8K_FIELDS, bad)


def test_the_bundle_only_reads_parquet_and_the_prep_box_writes_it():
    from twgrpo.formats import thrift
    assert {"write_table", "VERL_GSM8K_FIELDS"}.isdisjoint(vars(parquet))
    assert {"write_struct", "encode_struct", "_write_varint"}.isdisjoint(vars(thrift))
