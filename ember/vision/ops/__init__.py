"""torchvision's ``torchvision.ops``: the layers models share, and the box, RoI and loss functions detection
programs use (``nms``, ``batched_nms``, ``box_iou``, ``roi_align``, ``roi_pool``, ``sigmoid_focal_loss``,
``FeaturePyramidNetwork``, ``MultiScaleRoIAlign``, ...). Submodules follow torchvision's layout
(``ops.boxes``, ``ops.roi_align``, ``ops.poolers``, ``ops.feature_pyramid_network``, ``ops.misc``)."""
from ember.vision.ops.misc import (MLP, Conv2dNormActivation, FrozenBatchNorm2d, Permute,  # noqa: F401
                                   SqueezeExcitation)
from ember.vision.ops.misc import Conv3dNormActivation  # noqa: F401
from ember.vision.ops.stochastic_depth import StochasticDepth, stochastic_depth  # noqa: F401
from ember.vision.ops.boxes import (batched_nms, box_area, box_convert, box_iou, clip_boxes_to_image,  # noqa: F401
                                    complete_box_iou, distance_box_iou, generalized_box_iou, masks_to_boxes, nms,
                                    remove_small_boxes)
from ember.vision.ops.box_losses import (complete_box_iou_loss, distance_box_iou_loss,  # noqa: F401
                                         generalized_box_iou_loss)
from ember.vision.ops.focal_loss import sigmoid_focal_loss  # noqa: F401
from ember.vision.ops.roi_align import RoIAlign, roi_align  # noqa: F401
from ember.vision.ops.roi_pool import RoIPool, roi_pool  # noqa: F401
from ember.vision.ops.poolers import MultiScaleRoIAlign  # noqa: F401
from ember.vision.ops.feature_pyramid_network import FeaturePyramidNetwork  # noqa: F401
