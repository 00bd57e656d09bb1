"""The census of a DTensor (FSDP2's sharded parameters and optimizer state,
examples/titan_train.py): each rank fingerprints its own shard, as it holds
it. A DTensor has no .numpy(), so before this the census of an FSDP2
trainer's registered state raised instead of being written."""

import unittest

from resumecheck import census


class TestCensusDTensor(unittest.TestCase):
    def setUp(self):
        import torch.distributed as dist  # noqa: PLC0415

        self.dist = dist
        # one rank, an in-process store: no port, nothing outside this process
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    def tearDown(self):
        self.dist.destroy_process_group()

    def test_local_shard(self):
        import torch  # noqa: PLC0415
        from torch.distributed.device_mesh import init_device_mesh  # noqa: PLC0415
        from torch.distributed.tensor import Shard, distribute_tensor  # noqa: PLC0415

        mesh = init_device_mesh("cpu", (1,))
        t = torch.arange(12, dtype=torch.float32).reshape(4, 3)
        d = distribute_tensor(t, mesh, [Shard(0)])
        self.assertEqual(census.format_value(d), census.fingerprint(d.to_local()))
        self.assertEqual(census.fingerprint(d), census.fingerprint(t))  # one rank: its shard is the tensor
        # negative control: another value is another fingerprint
        self.assertNotEqual(census.fingerprint(distribute_tensor(t + 1, mesh, [Shard(0)])), census.fingerprint(d))
        # a census of a dict holding DTensors is written (state_fields)
        fields = census.state_fields(3, {"sharded": {"w": d}}, rng=False)
        self.assertIs(fields["state.sharded.w"], d)
        self.assertEqual(census.format_value(fields["state.sharded.w"]), census.fingerprint(t))
        # the reason for the fix: the tensor itself cannot be read as numpy
        with self.assertRaises(RuntimeError):
            d.numpy()


if __name__ == "__main__":
    unittest.main()
